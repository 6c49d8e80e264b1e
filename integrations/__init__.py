"""Adapters that guard an agent on the SDK or framework it already uses.

Each adapter is a module of its own with its own extra (``pip install
'guardtrace[openai]'``, ...), imported only when asked for: importing
``guardtrace.integrations`` loads no SDK. Adapters sit above the hooks (``collectors``)
and use only them; nothing below imports an adapter.
"""
