"""Model lifecycle under traffic: promote version N+1, roll back, survive a broken N+1, unload/load
cycles — each judged from what every single request got back (harness.lifecycle.traffic)."""
