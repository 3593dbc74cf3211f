from headwater.cli import main

main()
