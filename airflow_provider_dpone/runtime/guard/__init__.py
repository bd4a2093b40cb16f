"""The target commit guard (seed 000): the route-wide scan, the commit lifecycle, the operator's
resolution and inspection, and batch IDs."""
