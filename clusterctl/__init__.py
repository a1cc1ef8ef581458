"""clusterctl: survey, benchmark, tune and bootstrap bare-metal GPU clusters over SSH."""

__version__ = "0.1.0"
