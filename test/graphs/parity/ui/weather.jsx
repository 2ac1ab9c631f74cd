// Generative UI components of the parity project (the official suite's tests/graphs/agent/ui.tsx, in JSX).
import "./weather.css";

const WeatherComponent = (props) => {
  return <div className="weather">Weather for {props.city}</div>;
};

export default {
  "weather-component": WeatherComponent,
};
