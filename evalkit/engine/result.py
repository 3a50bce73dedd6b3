"""What `evalkit.run` returns: the run's summary, its records and where they are, and the records as
rows for a notebook (a list of dicts; a pandas DataFrame when pandas is installed, which evalkit does
not require)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.rundir.rows import COLUMNS, price_in, query_rows


@dataclass(repr=False)
class RunResult:
    summary: dict[str, Any]
    records: list[Record]
    out_dir: Path
    exit_code: int = 0
    messages: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        """Short: a notebook shows it, and asyncio.run formats it (through the SIGINT handler it
        restores) — the default repr of every record cost 0.2 s at 5,000 records."""
        s = self.summary
        return (f"RunResult({s.get('benchmark')!r}, {s.get('model')!r}, {len(self.records)} records, "
                f"exit_code={self.exit_code}, out_dir={str(self.out_dir)!r})")

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per query, in the order of the records: question and query id, variant, model, raw
        and parsed answer, gold, correct, error, latency, tokens, cost (the columns of `evalkit export
        --to csv`; cost_usd what the answer cost when asked, list_cost_usd at list price, cached or not; None
        where no price is known)."""
        config = self.summary.get("config")
        price = price_in(config) if isinstance(config, dict) else None
        return query_rows(self.records, price, run=Path(self.out_dir).name,
                          benchmark=str(self.summary.get("benchmark", "")))

    def to_pandas(self) -> Any:
        """`to_rows()` as a pandas DataFrame (one row per query, the columns in a fixed order)."""
        try:
            import pandas
        except ImportError:
            raise EvalkitError("RunResult.to_pandas needs pandas, which evalkit does not install: "
                               "pip install pandas (or use RunResult.to_rows(), a list of dicts)") from None
        return pandas.DataFrame(self.to_rows(), columns=list(COLUMNS))
