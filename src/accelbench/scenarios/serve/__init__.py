"""Serving benchmarks: an OpenAI-compatible server measured under load (accelbench serve)."""
