"""The emulated cluster: network namespaces with shaped links, and runs placed in them."""
