"""Apache Iceberg: the table spec (https://iceberg.apache.org/spec/), v1 and v2."""
