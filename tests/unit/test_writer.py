"""consumers/writer.py without a store: what the writer does when it is built."""

from __future__ import annotations

import subprocess
import sys


def test_building_a_writer_loads_what_the_first_insert_would() -> None:
    # clickhouse-connect imports pandas on the first insert; the writer pays it at
    # startup so the first batch is not 0.3 s late. Fresh interpreter: nothing cached.
    program = (
        "import sys\n"
        "from guardtrace.consumers.writer import ClickHouseWriter\n"
        "before = 'pandas' in sys.modules\n"
        "ClickHouseWriter(object(), 'guardtrace')\n"
        "from clickhouse_connect.driver import options\n"
        "print(before, 'pd' in vars(options))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    assert out == ["False", "True"]
