"""The pure core: plain data in, decisions out. No I/O, no clocks, no globals."""
