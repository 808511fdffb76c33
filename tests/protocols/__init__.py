"""The standard protocol endpoints (AG-UI, A2A, ACP), each driven by its official client."""
