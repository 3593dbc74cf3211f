"""The group coordinator: consumer-group membership, rebalances and committed offsets, as a sans-IO
state machine over a clock the server shell passes in; the shell persists its records in
``__consumer_offsets``."""
