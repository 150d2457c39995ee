"""docs/options.md's tables are generated from the option models: they must say what the command
line's help says (the same declarations), so a changed option cannot leave the docs behind."""

from spark_jobs.option_docs import DOC, document


def test_the_options_tables_are_the_models_own() -> None:
    text = DOC.read_text()
    assert text == document(), "docs/options.md is behind the models: run python -m spark_jobs.option_docs"
    compaction = text[text.index("## `lakeops compact`") : text.index("## `lakeops checkpoint`")]
    assert "| `--keep-dangling-deletes` | Iceberg |" in compaction and "| `--zorder-by COLUMNS` | Delta |" in compaction
    for command in ("inspect", "compact", "checkpoint", "expire", "orphans", "cdc", "restore", "purge-trash"):
        assert f"## `lakeops {command}`" in text
    assert (
        "| `--snapshot-id ID` | Iceberg |" in text
        and "| `--prefix-mismatch-mode {error,ignore,delete}` | Iceberg |" in text
    )
