"""The domain: resume planning, the target commit guard lifecycle and the transfer paths.

Imports contracts and ports only. No vendor SDK ever enters here (import-linter enforces it).
"""
