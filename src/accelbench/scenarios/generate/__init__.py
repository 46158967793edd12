"""The generate scenario: prefill and decode of decoder-only language models (issue 23)."""
