"""The vocabulary of awaken-stdio: pure data and protocols, no I/O.

Everything above this package (runtime, providers, tools, stores, protocols) speaks in these types.
"""
