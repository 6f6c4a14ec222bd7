"""One run: launch/ starts, places and watches its processes; process/ is what each training
process does (the harness, its records); models/ and data/ are what it trains on; faults/ is what
it injects and how it recovers. The strategies (strategies/) plug into process/ and launch/."""
