"""strae: reproduce and extend Self-StrAE and Banyan (structured embedding models) across languages."""

__version__ = "0.1.0"
