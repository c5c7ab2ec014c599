"""pspxdp's lab: the paper's experiments and the side-by-side comparison with
tbf, htb and no shaping, in network namespaces (lab/lab.sh)."""
