"""Per-partition replication cores, sans-IO: leader/follower state, ISR, high watermark, acks, throttles.

See ``docs/replication.md`` for the rules and for how the server shell drives them.
"""
