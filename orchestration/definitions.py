"""Dagster definitions for lakeops: ``workspace.yaml`` loads ``defs`` from here.

Registry-driven assets, checks, schedules and sensors are generated here as the platform grows; this
module stays the single entry point.
"""

from __future__ import annotations

import dagster as dg

defs = dg.Definitions()
