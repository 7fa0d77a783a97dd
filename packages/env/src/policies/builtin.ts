// Every built-in policy registers itself on import.
import './selftime';
import './microrank';
import './expert/expert';
import './oracl-script';
import './rclagent-script';
import './knowledgemind-script';
import './rcaflow-script';
