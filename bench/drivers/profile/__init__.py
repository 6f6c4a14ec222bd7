"""`python -m bench profile`: the transport profile of the machines it runs on."""
