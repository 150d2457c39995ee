"""A registry exercising every policy, shared by the orchestration tests."""

SAMPLE = """
storage: {endpoint_url: "http://127.0.0.1:9000", access_key_id_env: LAKE_KEY, secret_access_key_env: LAKE_SECRET}
spark: {master: "local[2]", conf: {spark.sql.shuffle.partitions: "4"}}
tables:
  - name: events
    location: s3://lake/events
    owners: [team:data-platform, oncall@example.com]
    tags: {tier: gold}
    compaction: {target_file_size: 64MB, small_file_trigger: 20, partitioned: true}
    checkpoint: {interval: 25}
    expiry: {older_than: 30d, retain_last: 5}
    orphans: {older_than: 7d}
    cdc: {enabled: true, output: s3://lake/events_changes, start_date: 2026-11-01, key: [event_id]}
    schedules: {nightly: "30 2 * * *"}
  - name: orders
    catalog: {uri: "sqlite:///catalog.db"}
    identifier: shop.orders
    format: iceberg
"""
