package connection

import "errors"

func execve(string, []string, []string) error {
	return errors.New("tether " + ContainerInitCommand + " runs inside Linux containers only")
}
