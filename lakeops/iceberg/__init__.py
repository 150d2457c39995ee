"""Apache Iceberg: the table spec (``specs/iceberg-table-spec.txt``), v1 and v2."""
