"""The Mistake Book: a persistent, crash-safe memory of the tests that broke candidates."""

from codea1.mistakes.book import (
    BookStats,
    MistakeBook,
    MistakeEntry,
    MistakeUpdate,
    StepSummary,
    resolve_book_path,
)

__all__ = ["BookStats", "MistakeBook", "MistakeEntry", "MistakeUpdate", "StepSummary", "resolve_book_path"]
