# TEMPORARY local shim (never committed): the helper's module replaces it.
from pydantic import BaseModel
class Verification(BaseModel):
    passed: bool
    summary: str
    details: dict = {}
def compaction_kept_rows(target, report, o=None): return Verification(passed=True, summary="shim")
def checkpoint_matches_log(target, report, o=None): return Verification(passed=True, summary="shim")
def retained_files_exist(target, o=None): return Verification(passed=True, summary="shim")
def change_feed_unique(output, key=None, o=None): return Verification(passed=True, summary="shim")
