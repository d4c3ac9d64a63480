# The Docker image (docker/), built and run as a user would.
#   make docker-check   as root: installs docker.io, docker-compose and
#                       debootstrap when missing, starts dockerd if none
#                       runs, makes a local debian:bookworm base with
#                       debootstrap when none is present, builds the image
#                       with the classic `docker build`, runs the test suite
#                       in the build stage, runs the image with
#                       ECOPT_DATA_DIR as a volume, checks /livez, runs a
#                       job with a token and reads its CSV; then removes
#                       its containers and images (the base image stays)
.PHONY: docker-check

docker-check:
	@sh docker/check.sh
