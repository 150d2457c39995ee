"""Apache Iceberg: the table spec (https://iceberg.apache.org/spec/), format versions 1, 2 and 3.

Every version is read (:data:`lakeops.iceberg.metadata.SUPPORTED_READ_VERSIONS`). On v3 the
maintenance operations keep row lineage and read deletion vectors; only a generic commit (which
would have to write deletion vectors) is refused. Columns lakeops cannot decode (variant, geometry,
geography) refuse compaction and change capture only
(:meth:`lakeops.iceberg.metadata.TableMetadata.check_writable`). A table is a location ("File System
Tables") or a SQL, Glue or REST catalog's entry (:mod:`lakeops.iceberg.table_ref`,
:mod:`lakeops.iceberg.catalog`); the table properties lakeops reads are named in
:mod:`lakeops.iceberg.properties`."""
