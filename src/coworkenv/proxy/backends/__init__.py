"""Model backends behind one interface (:class:`coworkenv.proxy.backends.base.Backend`)."""
