"""A move ends where the plan says (issue #17's acceptance): on 6 brokers, ``headwater plan --goal
add-brokers`` → ``headwater reassign --execute`` → ``--verify``; afterwards every changed partition
is led by its preferred replica, and the leaders per broker in Metadata are the planner report's
"after" figures (the planner counts the first replica of each list as its leader, as Kafka's
preferred-leader election makes it).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from cluster_support import run_cli, start_cluster, wait_for

PARTITIONS = 12


def test_plan_execute_verify_ends_with_the_planned_leaders(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "cluster", 6)
    try:
        sources = {p: [(p + j) % 3 + 1 for j in range(3)] for p in range(PARTITIONS)}
        run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "orders",
                "--replica-assignment", ",".join(":".join(map(str, sources[p])) for p in range(PARTITIONS)))
        cluster.wait_full_isr(["orders"], PARTITIONS)
        plan = tmp_path / "plan.json"
        report = json.loads(run_cli("plan", "--bootstrap-server", cluster.bootstrap, "--goal", "add-brokers",
                                    "--brokers", "4,5,6", "--engine", "local", "--format", "json", "-o", str(plan)))
        moves = json.loads(plan.read_text())["partitions"]
        assert moves and report["leader_changes"] > 0
        out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
                      "--reassignment-json-file", str(plan))
        assert "Successfully started partition reassignments" in out, out

        def done() -> bool:
            verify = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--verify",
                             "--reassignment-json-file", str(plan))
            return all(f"Reassignment of partition {m['topic']}-{m['partition']} is completed." in verify for m in moves)

        wait_for(done, 120, "every planned move to complete")
        wanted = {m["partition"]: m["replicas"] for m in moves}
        expected = {b: row["leaders"][1] for b, row in report["per_broker"].items() if row["leaders"][1]}

        def settled() -> bool:
            lines = cluster.describe("orders")
            return (all(line.leader == wanted[line.partition][0] for line in lines if line.partition in wanted)
                    and {str(b): n for b, n in Counter(line.leader for line in lines).items()} == expected)

        wait_for(settled, 30, f"every moved partition led by its preferred replica, leaders per broker {expected}")
    except BaseException:
        for name, tail in cluster.log_tails():
            print(name, tail, sep="\n")
        raise
    finally:
        cluster.stop()

