"""GenViP's first step: translate every IF-Bench infrared image to RGB with an image-editing model.

`evalkit translate if-bench --images DIR --out DIR --model SPEC` sends each image with the
paper's editing prompt (GENVIP_INSTRUCTION) through `editing.run_edits`, which caches by
content, resumes from the output folder and runs concurrently. Each translation is written
as `<image stem>.<ext>`; the loader finds it for `--genvip --translated-images DIR` by the
IR file's name, or by its stem when the editor returned another format (PNG for a JPG).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evalkit.ask.editing import GENVIP_INSTRUCTION, EditRequest, EditResult, create_editor, run_edits
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.store.cache import CacheLike, NullCache, ResponseCache
from evalkit.ask.store.seal import CacheSeal
from evalkit.benchmarks.readers.ifbench import IMAGE_EXTS, entries, parse_item
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.text import data_json
from evalkit.core.types import ImageRef
from evalkit.images.pipeline import ImagePipeline


def image_names(images: Path, data: Path | None = None) -> list[str]:
    """The image file names to translate: those the question file names, else every image in the folder."""
    if data is not None:
        try:
            raw = data_json.loads(read_caps.read_whole(Path(data)))
        except (OSError, ValueError) as exc:
            raise EvalkitError(f"{data}: cannot read ({exc})") from exc
        names = dict.fromkeys(parse_item(w, d, obj)["image"] for w, d, obj in entries(raw, Path(data)))
        return list(names)
    return sorted(p.name for p in images.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTS)


def edit_requests(images: Path, names: Sequence[str]) -> list[EditRequest]:
    """One edit per image, id = the file's stem (the output file's name); missing files are an error."""
    missing = [n for n in names if not (images / n).is_file()]
    if missing:
        raise EvalkitError(f"--images: {len(missing)} image(s) not found, e.g. {images / missing[0]}")
    stems = [Path(n).stem for n in names]
    if len(set(stems)) != len(stems):
        dup = next(s for s in stems if stems.count(s) > 1)
        raise EvalkitError(f"--images: two images share the name '{dup}' (outputs are named by stem)")
    return [EditRequest(s, ImageRef.from_path(str(images / n)), GENVIP_INSTRUCTION) for s, n in zip(stems, names,
                                                                                                      strict=True)]


async def translate_images(images: Path, out: Path, model: str, *, data: Path | None = None,
                           base_urls: Sequence[str] = (), env: Mapping[str, str] | None = None,
                           cache_dir: str | None = "cache", concurrency: int = 8, max_attempts: int = 6,
                           timeout_s: float = 300.0, limit: int | None = None, rpm: float | None = None,
                           console: Console | None = None, progress: bool = True) -> list[EditResult]:
    """Translate the images (cached, resumable, concurrent, with a progress bar); errors stay values."""
    images = Path(images).expanduser()
    if not images.is_dir():
        raise EvalkitError(f"--images: not a directory: {images}")
    names = image_names(images, data)[: limit or None]
    requests = edit_requests(images, names)
    editor = create_editor(model, base_urls, os.environ if env is None else env, timeout_s=timeout_s)
    cache: CacheLike = (ResponseCache(Path(cache_dir), CacheSeal.from_env(os.environ if env is None else env))
                        if cache_dir else NullCache())
    pipeline = ImagePipeline()
    console = console or Console(stderr=True)
    bar = Progress(TextColumn("[bold]GenViP translate"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                   disable=not (progress and console.is_terminal))
    task = bar.add_task("translate", total=len(requests), note="")
    tally = {"network": 0, "cache": 0, "output": 0, "errors": 0}

    def tick(result: EditResult) -> None:
        tally["errors" if not result.ok else result.source] += 1
        bar.update(task, advance=1, note=" · ".join(f"{k} {v}" for k, v in tally.items()))

    try:
        with bar:
            return await run_edits(requests, editor, out_dir=Path(out), cache=cache,
                                   limiter=Limiter(concurrency=concurrency, rpm=rpm), pipeline=pipeline,
                                   concurrency=concurrency, max_attempts=max_attempts, timeout_s=timeout_s,
                                   progress=tick, keep_images=False)
    finally:
        await editor.close()
        cache.close()
        pipeline.close()
