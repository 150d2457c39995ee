-- Run once by the postgres image on an empty data directory (deploy/compose.yaml mounts it into
-- /docker-entrypoint-initdb.d). POSTGRES_DB is Dagster's database; the Iceberg SQL catalog gets its own.
CREATE DATABASE iceberg_catalog;
