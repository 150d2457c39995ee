#!/usr/bin/env bash
# The image's entrypoint. Spark on Kubernetes starts executor pods from the image with the single
# argument `executor` and describes the executor in SPARK_* environment variables (the contract of
# Spark's own images); this starts that executor. Any other command runs as given (dagster, lakeops,
# spark-class ...).
set -euo pipefail

if [[ "${1:-}" != "executor" ]]; then
    exec "$@"
fi

# SPARK_JAVA_OPT_0, _1, ...: one JVM option each, in index order.
java_opts=()
while IFS='=' read -r name _; do
    java_opts+=("${!name}")
done < <(env | grep -o '^SPARK_JAVA_OPT_[0-9]*=' | sort -t_ -k4 -n)

exec java "${java_opts[@]}" -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    -cp "${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}"
