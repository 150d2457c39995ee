"""Format-neutral operations: plan and report models, and dispatch by detected table format."""
