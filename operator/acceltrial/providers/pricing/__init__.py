"""The pricing port and its adapters: the bundled catalog, the AWS Price List API, trial prices."""
