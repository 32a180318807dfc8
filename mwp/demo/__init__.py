"""The proof of concept (`mwp demo`): two concurrent software-development Missions run by a
Coordinator and Workers that are each their own process through the Group gateway, a human
deciding in the console, and injected failures; one report of named checks with their proof."""
