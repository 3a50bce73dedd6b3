"""Dataset sources: where a benchmark's files come from (the bundled sample, a local path, the
Hugging Face Hub, a repository's files at a commit), how they are checked, and the lock that pins them.

Below the benchmarks (they load what this resolves) and above core only. Networked parts
(huggingface_hub, aiohttp) are imported only when a networked source is used.
"""
