"""docs/compaction-options.md's table is generated from the option models: it must say what the
command line's help says (the same declarations), so a changed option cannot leave the docs behind."""

from pathlib import Path

from spark_jobs.compact import options_table

DOC = Path(__file__).parents[2] / "docs" / "compaction-options.md"


def test_the_compaction_options_table_is_the_models_own() -> None:
    text = DOC.read_text()
    table = text[text.index("| option |") :]
    assert table == options_table(), "docs/compaction-options.md is behind the models: write options_table() into it"
    assert "| `--keep-dangling-deletes` | Iceberg |" in table and "| `--zorder-by COLUMNS` | Delta |" in table
