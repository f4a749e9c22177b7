"""NeuSight reproduction: forecast GPU kernel and model latency from spec sheets."""
