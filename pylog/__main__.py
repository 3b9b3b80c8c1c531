from pylog.cli import main

raise SystemExit(main())
