"""``python -m pgque_bench``: run the benchmark."""

from pgque_bench import main

raise SystemExit(main())
