"""Inserting lists of rows with clickhouse-connect without importing pandas.

Every ``client.insert`` asks whether its data is a pandas DataFrame or a numpy array
(``options.pd`` and ``options.np`` in ``clickhouse_connect.driver.options``), and asking
imports pandas, and with it numpy and pyarrow, the first time: about 90 MB of RSS (some
45 MB of it private) in a process that only ever inserts lists. Against a ClickHouse
server that was half of the consumer's memory (benchmarks/pipeline_throughput.py
``--store server``: peak RSS 193 MB with the import, 114 MB without).

While pandas (or numpy) has not been imported, no DataFrame (or array) exists in the
process, so the answer is "no" without the import. :func:`pandas_free_insert` gives that
answer for the duration of an insert, in the form clickhouse-connect itself uses for a
package that is not installed (``None``), and takes it back afterwards: the attributes
then resolve lazily again, so code that does use pandas with clickhouse-connect later in
the same process gets it. Once pandas or numpy is imported, it changes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["pandas_free_insert"]

# The package behind each of clickhouse-connect's lazy attributes (options.py resolves
# pd_time_test together with pd).
_LAZY_ATTRIBUTES = (("pandas", ("pd", "pd_time_test")), ("numpy", ("np",)))


@contextmanager
def pandas_free_insert() -> Iterator[None]:
    """Inside, clickhouse-connect sees pandas and numpy as not installed, unless they
    are imported already; outside, it resolves them as before."""
    from clickhouse_connect.driver import options

    namespace = vars(options)
    answered = [attribute for package, attributes in _LAZY_ATTRIBUTES
                if package not in sys.modules
                for attribute in attributes if attribute not in namespace]
    for attribute in answered:
        namespace[attribute] = None
    try:
        yield
    finally:
        for attribute in answered:
            namespace.pop(attribute, None)
