from tailmem.cli import main

raise SystemExit(main())
