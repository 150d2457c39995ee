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

#: Registries every reader refuses (Dagster's loader and ``lakeops plan-maintenance``), each with what the
#: message names (issue 34: plan-maintenance planned them, exit 0, every action of a duplicate table twice).
REFUSED = {
    "budget window": (
        'maintenance_budget: {window: "61 25 * * *", core_minutes: 120}\ntables:\n  - {name: events, location: /t}\n',
        "maintenance_budget.window: '61 25 * * *' is not a cron expression",
    ),
    "schedule": (
        "tables:\n  - {name: events, location: /t, schedules: {nightly: '61 25 * * *'}}\n",
        "table 'events': schedules.nightly: '61 25 * * *' is not a cron expression",
    ),
    "duplicate name": (
        "tables:\n  - {name: events, location: /t}\n  - {name: events, location: /u}\n",
        "tables: events registered more than once",
    ),
    "name with a newline": (
        'tables:\n  - {name: "events\\n", location: /t}\n',
        "name: 'events\\n' must be letters, digits and underscores",
    ),
    "unknown policy key": (
        "tables:\n  - {name: events, location: /t, compaction: {target_size: 1GB}}\n",
        "table 'events': unknown key compaction.target_size",
    ),
}
