"""CaPtain harness: the policy-facing robot API over any driver."""
