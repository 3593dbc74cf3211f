"""``headwater console``: the operator console in the browser (docs/console.md).

It reads the cluster only through the Kafka protocol and the brokers' Prometheus endpoints, so it
works against Apache Kafka too; like the admin tools it never imports broker packages.
"""
