"""MLS-MPM over `dim`, shared by sims.diffmpm and sims.diffmpm3d: the robot's training glue
(robot.py), kernel factories (kernels.py), material models (materials.py), rendering."""
