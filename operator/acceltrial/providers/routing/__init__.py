"""The routing port and its adapters: Gateway API HTTPRoute weights, replica ratio."""
