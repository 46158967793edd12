from accelbench.cli import main

main()
