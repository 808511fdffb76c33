from opennua.cli import main

main()
